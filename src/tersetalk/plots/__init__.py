"""Seaborn figures for the paper."""
