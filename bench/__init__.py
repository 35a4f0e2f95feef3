"""`make bench`: the performance checks, each against a baseline measured in the same run."""
