"""hqval.report"""
