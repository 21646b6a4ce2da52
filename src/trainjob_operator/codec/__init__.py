"""Text codecs, the bottom layer (below `api`; they import nothing of the project): JSON text (`jsontext`), the
bounded YAML load (`yamltext`) and the one YAML writer (`yamldump`). Pure functions of text and JSON-like values."""
