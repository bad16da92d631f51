"""Tests of courtier.politeness."""
