"""Screens: dashboard, detail, history, and the modals (inject, kill, mute, help)."""
