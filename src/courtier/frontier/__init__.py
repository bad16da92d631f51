"""frontier"""
