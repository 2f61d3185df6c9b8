"""`envsnap timeline`: what changed on a host, and when, from the evidence already there."""
