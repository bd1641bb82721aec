"""MultiEmo-Bench: how strongly each of Mikels' eight emotions is evoked by an image, against 20 annotators' votes."""
