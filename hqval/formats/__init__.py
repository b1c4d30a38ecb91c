"""hqval.formats"""
