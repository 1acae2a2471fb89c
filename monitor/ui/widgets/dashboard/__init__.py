"""Widgets of the live dashboard."""
