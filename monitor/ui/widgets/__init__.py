"""Widgets, one folder per screen (``dashboard``, ``detail``, ``history``) plus ``common``."""
