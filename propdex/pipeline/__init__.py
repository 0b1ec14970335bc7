"""The pipeline's stages as plain functions; tasks/ wraps each in a Prefect task."""
