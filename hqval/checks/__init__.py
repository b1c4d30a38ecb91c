"""hqval.checks"""
