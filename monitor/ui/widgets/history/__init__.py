"""Widgets of the history screen."""
