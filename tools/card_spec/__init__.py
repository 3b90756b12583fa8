"""post_card's card spec: the parameter model, its problems, and its two renderings."""
