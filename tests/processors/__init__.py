"""Processors the tests configure by their ``package.module:function`` path, as a team would."""
