"""The GUI's logic without pygame: board geometry, clicks and keys to commands, the game
session (the net thinking in a thread), area ownership for the final count. See README.md."""
