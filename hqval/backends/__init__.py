"""hqval.backends"""
