"""The fit of effective utilization (MFU x goodput) to published runs, and its leave-one-out check."""
