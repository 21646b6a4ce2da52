"""The thin adapter to the Kubernetes API (async client, server-side apply, QPS limits)."""
