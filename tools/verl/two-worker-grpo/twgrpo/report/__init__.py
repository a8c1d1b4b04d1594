"""What people read: the run's view model, the self-contained HTML page and its SVG, the text
summary of `make report`, and the `make runs` listing.

May import: formats/, run/, checks/ and other modules of report/.
"""
