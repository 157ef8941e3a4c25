"""The worker protocol: worker context, the .board/ contract, results, verification, review."""
