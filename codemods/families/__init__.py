"""Shared bases of rule families: the machinery several rule modules use (a family's rules
import it; rules never import each other)."""
