"""Widgets of the session detail screen."""
