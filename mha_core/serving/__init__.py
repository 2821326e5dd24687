"""What a server shares between visitors: the compute-once store, the heavy-work queue, export,
the model menu. Imports everything below it, never the CLI or the pages."""
