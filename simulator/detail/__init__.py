"""Cycle-level models of the parts whose closed forms decide the fast model's answer
(issue 28): they check `aipusim.isa.cost` and back ``--detail cycle``. See README.md."""
