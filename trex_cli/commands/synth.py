"""`trex synth`: being written (issue 2)."""


def synth() -> None:
    """(being written)"""
