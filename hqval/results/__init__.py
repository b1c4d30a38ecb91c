"""hqval.results"""
