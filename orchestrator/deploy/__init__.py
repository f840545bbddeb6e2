"""Deployment: the images of the compose stack and the host settings it needs."""
