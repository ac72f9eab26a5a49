"""Clients of marin's services: ``marin.inference.client.LogClient``."""
