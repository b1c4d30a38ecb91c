"""hqval.timing"""
