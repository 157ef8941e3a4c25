"""Operating agentboard as a service: Prometheus metrics (:mod:`.metrics`), health checks
(:mod:`.health`) and structured logs (:mod:`.logs`); docs/metrics.md and docs/deploy.md."""
