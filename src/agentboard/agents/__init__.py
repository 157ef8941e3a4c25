"""What the board itself asks a language model (docs/ARCHITECTURE.md § agents/)."""
