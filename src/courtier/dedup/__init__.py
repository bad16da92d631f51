"""dedup"""
