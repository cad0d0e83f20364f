"""Characters and the small grammar helpers the story plots are written with.

A character knows how to introduce itself ("a shy fox named Pip"), how to be named again ("Pip",
"the fox") and its pronouns, so that every plot sentence agrees with whoever fills it.
"""

from story_words import ANIMALS, BOY_NAMES, CHARACTER_ADJECTIVES, GIRL_NAMES, PET_NAMES

VOWELS = "aeiou"
ANIMAL_SOUNDS = {singular: sound for singular, _, sound in ANIMALS}
ANIMAL_PLURALS = {singular: plural for singular, plural, _ in ANIMALS}

PRONOUNS = {
    "he": {"he": "he", "him": "him", "his": "his", "self": "himself"},
    "she": {"he": "she", "him": "her", "his": "her", "self": "herself"},
}


def article(phrase):
    """ "a" or "an" before `phrase` (the word lists avoid the spelling exceptions)."""
    return ("an " if phrase[0].lower() in VOWELS else "a ") + phrase


def cap(text):
    return text[0].upper() + text[1:]


def pick(rng, items):
    return items[rng.randrange(len(items))]


class Character:
    """A child (always named) or an animal (named or not), with an adjective and a gender."""

    def __init__(self, kind, gender, name=None, adjective=None):
        self.kind = kind  # "girl", "boy" or an animal's singular noun
        self.gender = gender
        self.name = name
        self.adjective = adjective
        self.pronoun = PRONOUNS[gender]

    @property
    def is_animal(self):
        return self.kind not in ("girl", "boy")

    def intro(self):
        """First mention: "a little girl named Lily", "a brave old owl"."""
        noun = f"{self.adjective} {self.kind}" if self.adjective else self.kind
        text = article(noun)
        return f"{text} named {self.name}" if self.name else text

    def ref(self):
        """Later mentions: the name, else "the fox"."""
        return self.name or f"the {self.kind}"

    def Ref(self):
        return cap(self.ref())

    def he(self):
        return self.pronoun["he"]

    def He(self):
        return cap(self.pronoun["he"])

    def him(self):
        return self.pronoun["him"]

    def his(self):
        return self.pronoun["his"]

    def His(self):
        return cap(self.pronoun["his"])

    def self_(self):
        return self.pronoun["self"]

    def sound(self):
        """What it said, in the past tense: "barked", or "said" for a child."""
        return ANIMAL_SOUNDS.get(self.kind, "said")


def random_character(rng, kind=None, name=None, human=None, named=None):
    """A character; `kind`, `name`, `human` and `named` pin what a request asked for."""
    if kind in ("girl", "boy"):
        human = True
    elif kind is not None:
        human = False
    if human is None:
        human = rng.random() < 0.45
    adjective = pick(rng, CHARACTER_ADJECTIVES) if rng.random() < 0.8 else None
    if human:
        gender = {"girl": "she", "boy": "he"}.get(kind) or pick(rng, ["he", "she"])
        names = GIRL_NAMES if gender == "she" else BOY_NAMES
        kind = "girl" if gender == "she" else "boy"
        if name is None:
            name = pick(rng, names)
        return Character(kind, gender, name, adjective)
    if kind is None:
        kind = pick(rng, ANIMALS)[0]
    gender = pick(rng, ["he", "she"])
    if named is None:
        named = name is not None or rng.random() < 0.7
    if named and name is None:
        name = pick(rng, PET_NAMES)
    return Character(kind, gender, name if named else None, adjective)


def friend_for(rng, hero):
    """A second character who can never be named like the hero: a child's friend is a child of
    the other gender (another name list) or an animal (pet names), an animal's friend is a child.
    Two characters of one name list would leave the choice between them to chance, and a model
    decoding greedily picks the same most likely name twice ("Nora and Nora")."""
    if hero.is_animal:
        return random_character(rng, human=True)
    if rng.random() < 0.5:
        return random_character(rng, kind="boy" if hero.gender == "she" else "girl")
    return random_character(rng, human=False)
