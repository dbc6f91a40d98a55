"""MLflow tracking: the run hierarchy, logging from the driver, reading runs back."""
