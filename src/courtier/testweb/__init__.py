"""testweb"""
