"""One module per plugin; the registry in `..registry` fixes their order."""
