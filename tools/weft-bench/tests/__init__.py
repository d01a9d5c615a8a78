"""Unit tests of weft-bench: python3 -m unittest discover tools/weft-bench"""
