"""Which differences between a good and a bad snapshot explain a regression, by experiment."""
