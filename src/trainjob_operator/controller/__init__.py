"""The kopf shell: the only package that imports kopf. Handlers call the core and apply its result."""
