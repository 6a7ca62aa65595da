"""One module per command group: parse options, call the library, print. No heavy imports at module level."""
