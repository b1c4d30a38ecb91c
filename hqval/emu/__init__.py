"""hqval.emu"""
