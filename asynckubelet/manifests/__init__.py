"""manifests."""
