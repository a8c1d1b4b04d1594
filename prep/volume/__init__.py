"""Write inputs onto the volume in the layout the bundle checks (the bundle's twgrpo/checks/inputs/inputs.py
is the other side: it reads and judges them). Standard library only."""
