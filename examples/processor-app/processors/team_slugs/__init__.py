"""The team's processors (``processorPackageDir`` of ``examples/processor-app``)."""
