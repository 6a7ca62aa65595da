"""`trex run`: being written (issue 9)."""


def run() -> None:
    """(being written)"""
