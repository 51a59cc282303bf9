"""Load harnesses that compare plnt against the limit beneath it and print ratios."""
