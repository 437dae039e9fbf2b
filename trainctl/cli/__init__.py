"""The command line: one module per command group, each a thin layer over trainctl.sdk.client."""
