"""politeness"""
