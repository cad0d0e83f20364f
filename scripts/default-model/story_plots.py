"""The plots: each turns a hero and a setting into paragraphs of sentences.

Every sentence has a few phrasings; which one, and every noun, comes from the story's own random
generator, so one seed gives one story.
"""

from story_text import ANIMAL_PLURALS, article, cap, friend_for, pick, random_character
from story_words import (
    FEARS, FEELINGS_BAD, FEELINGS_GOOD, GAMES, HIDING_SPOTS, INDOOR_FUN, OPENERS, PARENTS,
    PROJECTS, SMALL_ANIMALS, STUCK, WONDERS,
)

NUMBERS = ["two", "three", "four", "five"]
BREAKABLE = {
    "toy car", "toy boat", "robot", "train", "kite", "cup", "drum", "bell", "flute", "lantern",
    "jar", "whistle", "spinning top", "doll", "wagon", "sled", "bike",
}
PRETTY_FINDS = [
    ("pretty shells", "a necklace"), ("soft feathers", "a crown"), ("shiny stones", "a picture"),
    ("red leaves", "a card"), ("wild flowers", "a bunch of flowers"), ("smooth pebbles", "a little house"),
]
LANDMARKS = ["the old oak tree", "the big rock", "the red gate", "the top of the hill", "the pond"]


class Setting:
    """Where and when, and the things a plot may use."""

    def __init__(self, rng, place, thing, food, weather):
        self.place_name, self.at, self.to = place
        self.thing, self.things = thing
        self.color = pick(rng, ["red", "blue", "green", "yellow", "orange", "pink", "purple",
                                "white", "brown", "shiny", "striped", "spotted", "little", "new"])
        self.food, self.foods = food
        self.weather = weather
        self.opener = pick(rng, OPENERS[weather])

    def colored_thing(self):
        return f"{self.color} {self.thing}"


def say(speaker, line, verb=None):
    """ "Line," said Lily. / "Line?" asked Lily. """
    verb = verb or ("asked" if line.endswith("?") else "said")
    body = line[:-1] + "," if line.endswith(".") else line
    return f'"{body}" {verb} {speaker.ref()}.'


def opening(rng, hero, s):
    """The first sentence: it introduces the hero. Animals live at the place; children near it."""
    home = s.at if hero.is_animal else f"near the {s.place_name}"
    return pick(rng, [
        f"Once upon a time, there was {hero.intro()}.",
        f"Once upon a time, there was {hero.intro()} who lived {home}.",
        f"Once upon a time, {hero.intro()} lived {home}.",
        f"There once was {hero.intro()}.",
        f"Once upon a time, in a little house {home}, there lived {hero.intro()}.",
    ])


def event(s):
    """The start of the day the story happens on: "One sunny morning," """
    return s.opener + ","


def parent_of(rng):
    noun, name = pick(rng, PARENTS)
    pronoun = "she" if noun in ("mom", "grandma") else "he"
    return noun, name, pronoun


def lost_thing(rng, hero, s):
    friend = friend_for(rng, hero)
    bad, good = pick(rng, FEELINGS_BAD), pick(rng, FEELINGS_GOOD)
    spots = [pick(rng, group) for group in HIDING_SPOTS]
    p1 = [opening(rng, hero, s),
          f"{hero.He()} had {article(s.colored_thing())} that {hero.he()} loved very much.",
          f"{event(s)} {hero.ref()} took {hero.his()} {s.thing} {s.to}.",
          pick(rng, [f"{hero.He()} played with it all morning.",
                     f"{hero.He()} played with it for a long time."]),
          pick(rng, [f"Then {hero.he()} put it down to look at a butterfly. When {hero.he()} turned around, the {s.thing} was gone!",
                     f"When it was time to go home, the {s.thing} was gone!"]),
          f"{hero.Ref()} looked everywhere, but {hero.he()} could not find it. {hero.He()} felt very {bad}."]
    p2 = [f"Just then, {friend.intro()} came by.",
          say(friend, f"Why are you {bad}?"),
          say(hero, f"I lost my {s.thing}."),
          say(friend, pick(rng, ["Do not worry. I will help you look for it.",
                                 "Let us look for it together."])),
          f"They looked {spots[0]}, but it was not there.",
          f"They looked {spots[1]}, but it was not there either.",
          f"Then {friend.ref()} saw something {spots[2]}. It was the {s.thing}!"]
    p3 = [f"{hero.Ref()} was so {good}.",
          pick(rng, [f'"Thank you!" said {hero.ref()}, and {hero.he()} gave {friend.ref()} a big hug.',
                     say(hero, "Thank you for helping me. You are a good friend.")]),
          f"From that day on, {hero.ref()} and {friend.ref()} were best friends."]
    return [p1, p2, p3], "help"


def rescue(rng, hero, s):
    victim_kind = pick(rng, [k for k in SMALL_ANIMALS if k != hero.kind])
    victim = random_character(rng, kind=victim_kind, named=False)
    where, tool, how = pick(rng, STUCK)
    p1 = [opening(rng, hero, s),
          f"{event(s)} {hero.ref()} was walking {s.at} when {hero.he()} heard a small sound.",
          f"{hero.He()} looked around and saw {victim.intro()}. It was stuck {where}!",
          say(victim, pick(rng, ["Help! I cannot get out!", "Please help me!"]), "cried")]
    p2 = [pick(rng, [f"{hero.Ref()} wanted to help, but {hero.he()} was too small to reach.",
                     f"{hero.Ref()} did not know what to do at first."]),
          f"Then {hero.he()} had an idea. {hero.He()} ran home and came back with {tool}.",
          f"{hero.He()} {how.format(kind=victim.kind)}.",
          f"Soon the {victim.kind} was free!"]
    p3 = [say(victim, "Thank you! You saved me."),
          f"{hero.Ref()} smiled. {hero.He()} felt very proud.",
          pick(rng, [f"After that, the {victim.kind} came to visit {hero.ref()} every day.",
                     f"The {victim.kind} and {hero.ref()} became good friends."])]
    return [p1, p2, p3], "help"


def share(rng, hero, s):
    friend = friend_for(rng, hero)
    p1 = [opening(rng, hero, s),
          pick(rng, [f"{hero.He()} got {article(s.colored_thing())} for {hero.his()} birthday.",
                     f"{hero.He()} had {article(s.colored_thing())}."]),
          f"{hero.He()} loved it and played with it every day."]
    p2 = [f"{event(s)} {hero.ref()} took {hero.his()} {s.thing} {s.to}. There {hero.he()} met {friend.intro()}.",
          say(friend, f"Can I play with your {s.thing} too?"),
          f'"No, it is mine!" said {hero.ref()}, and {hero.he()} held it tight.',
          f"{friend.Ref()} looked sad and walked away."]
    p3 = [f"Soon {hero.ref()} felt lonely. Playing alone was not much fun.",
          f'{hero.He()} ran after {friend.ref()}. "I am sorry. Do you want to play with my {s.thing}?" {hero.he()} asked.',
          f'{friend.Ref()} smiled. "Yes, please!"',
          pick(rng, ["They took turns and played together until the sun went down.",
                     f"They played with the {s.thing} together all afternoon."])]
    return [p1, p2, p3], "share"


def fear(rng, hero, s):
    what, obj, act = pick(rng, FEARS)
    noun, name, pron = parent_of(rng)
    p1 = [opening(rng, hero, s),
          f"{hero.Ref()} was afraid of {obj}.",
          f"It made {hero.him()} feel small and scared."]
    p2 = [f"{event(s)} {hero.he()} told {hero.his()} {noun}.",
          f'"{name}, I am scared of {obj}," said {hero.ref()}.',
          f"{name} gave {hero.him()} a big hug.",
          f'"It is okay to be scared," {pron} said. "Let us try together."',
          f"{hero.Ref()} took a deep breath. Then {hero.he()} {act.format(pos=hero.his())}.",
          "It was not so bad after all!"]
    p3 = [f"{hero.Ref()} felt very proud of {hero.self_()}.",
          f"Now {hero.he()} was not afraid of {what} anymore."]
    return [p1, p2, p3], "brave"


def try_again(rng, hero, s):
    goal, fail1, fail2, fix, success = pick(rng, PROJECTS)
    helper = friend_for(rng, hero)
    p1 = [opening(rng, hero, s),
          f"{event(s)} {hero.ref()} wanted {goal}.",
          f"{hero.He()} tried, but {fail1}.",
          f"{hero.He()} tried again, but {fail2}.",
          f"{hero.Ref()} sat down and felt {pick(rng, FEELINGS_BAD)}. {hero.He()} wanted to give up."]
    p2 = [f"Then {helper.intro()} came by.",
          say(helper, pick(rng, ["Do not give up. Try one more time.",
                                 "Everyone makes mistakes. Try again, and go slowly."])),
          f"So {hero.ref()} {fix}.",
          f"This time it worked! {cap(success)}."]
    p3 = [f"{hero.Ref()} jumped up and down with joy.",
          say(hero, pick(rng, ["I did it!", "Thank you for helping me not give up."]))]
    return [p1, p2, p3], "try"


def new_friend(rng, hero, s):
    friend = friend_for(rng, hero)
    game = pick(rng, GAMES)
    p1 = [opening(rng, hero, s),
          f"{hero.He()} had no friends to play with, and {hero.he()} often felt lonely."]
    p2 = [f"{event(s)} {hero.ref()} saw {friend.intro()} sitting all alone {s.at}.",
          say(hero, "Hello! Do you want to play with me?"),
          f"{friend.Ref()} was shy, but {friend.he()} nodded.",
          f"They played {game}. They laughed and had lots of fun."]
    p3 = [f'When the sun went down, {friend.ref()} asked, "Can we play again tomorrow?"',
          f'"Yes!" said {hero.ref()}.',
          "From then on, they played together every day."]
    return [p1, p2, p3], "friends"


def rainy_day(rng, hero, s):
    noun, name, _ = parent_of(rng)
    p1 = [opening(rng, hero, s),
          f"{event(s)} {hero.ref()} and {hero.his()} {noun} wanted to have a picnic {s.at}.",
          f"They packed some {s.foods} and a big blanket.",
          "But just when they were ready to go, it started to rain.",
          f"{hero.Ref()} looked out of the window and felt {pick(rng, FEELINGS_BAD)}."]
    p2 = [f'"Do not be sad," said {name}. "We can have fun inside."',
          f"So they {pick(rng, INDOOR_FUN)}.",
          "Then they had their picnic on the floor of the living room."]
    p3 = ["Later, the rain stopped and the sun came out. There was a big rainbow in the sky.",
          say(hero, "This was the best day ever!")]
    return [p1, p2, p3], "joy"


def sorry(rng, hero, s):
    friend = friend_for(rng, hero)
    broke = s.thing in BREAKABLE
    p1 = [opening(rng, hero, s),
          f"{event(s)} {hero.ref()} and {friend.intro()} were playing {s.at}.",
          f"{friend.Ref()} had {article(s.colored_thing())} that {friend.he()} loved.",
          f"{hero.Ref()} wanted to look at it, so {hero.he()} picked it up.",
          (f"But it slipped out of {hero.his()} hands and broke!" if broke else
           f"But it slipped out of {hero.his()} hands and fell into a muddy puddle!")]
    p2 = [f"{hero.Ref()} was scared. {hero.He()} wanted to hide it.",
          f"But then {hero.he()} thought about how sad {friend.ref()} would be.",
          f'{hero.He()} went to {friend.ref()} and said, "I am sorry. It was an accident."',
          f"{friend.Ref()} was sad, but {friend.he()} was glad that {hero.ref()} told the truth.",
          say(friend, "Let us fix it together."),
          (f"They got some glue and fixed the {s.thing}." if broke else
           f"They washed the {s.thing} with warm water until it was clean again.")]
    p3 = [say(friend, "Thank you for telling me the truth."),
          "They hugged and went back to playing."]
    return [p1, p2, p3], "honest"


def gift(rng, hero, s):
    noun, name, pron = parent_of(rng)
    finds, made = pick(rng, PRETTY_FINDS)
    obj = "her" if pron == "she" else "him"
    p1 = [opening(rng, hero, s),
          f"Soon it was the birthday of {hero.ref()}'s {noun}. {hero.Ref()} wanted to give {obj} a present.",
          f"But {hero.he()} did not have any money."]
    p2 = [f"{event(s)} {hero.he()} went {s.to} to look for something special.",
          f"{hero.He()} found {pick(rng, NUMBERS)} {finds} and put them in {hero.his()} pocket.",
          f"At home, {hero.he()} made {made} with them."]
    p3 = [f"On the birthday, {hero.ref()} gave the present to {hero.his()} {noun}.",
          f'{name} smiled and said, "This is the most beautiful present I have ever had!"',
          f"{hero.Ref()} felt warm and happy inside."]
    return [p1, p2, p3], "give"


def race(rng, hero, s):
    friend = friend_for(rng, hero)
    goal = pick(rng, LANDMARKS)
    p1 = [opening(rng, hero, s),
          f"{hero.Ref()} and {hero.his()} friend {friend.ref()} liked to race {s.at}.",
          f"{event(s)} they had a big race to {goal}.",
          '"Ready, set, go!" they shouted.']
    p2 = [f"{friend.Ref()} was fast, but {hero.ref()} was faster.",
          f"Then {friend.ref()} tripped over a root and fell down.",
          f"{hero.Ref()} stopped running and went back to help.",
          say(hero, "Are you okay?"),
          say(friend, pick(rng, ["My knee hurts.", "I think so, but I am a little scared."]))]
    p3 = [f"{hero.Ref()} helped {friend.ref()} up, and they walked to {goal} together.",
          "Nobody won the race that day, but they both felt happy."]
    return [p1, p2, p3], "friends"


def adventure(rng, hero, s):
    wonder, looks = pick(rng, WONDERS)
    seen = pick(rng, [a for a in ANIMAL_PLURALS if a != hero.kind])
    p1 = [opening(rng, hero, s),
          f"{hero.He()} loved to explore.",
          f"{event(s)} {hero.he()} packed {article(s.food)} and {hero.his()} {s.thing} in a little bag and went {s.to}."]
    p2 = [f"On the way, {hero.he()} saw {pick(rng, NUMBERS)} {ANIMAL_PLURALS[seen]} and a {s.color} butterfly.",
          f"{hero.He()} walked and walked until {hero.he()} found {wonder} {looks}.",
          f'"Wow!" said {hero.ref()}.',
          f"{hero.He()} sat down, ate {hero.his()} {s.food} and looked at it for a long time."]
    p3 = [f"When it was time to go home, {hero.he()} ran back to tell {hero.his()} family.",
          f"That night, {hero.ref()} fell asleep with a big smile."]
    return [p1, p2, p3], None


def hungry(rng, hero, s):
    friend = friend_for(rng, hero)
    p1 = [opening(rng, hero, s),
          f"{event(s)} {hero.ref()} was very hungry.",
          f"{hero.He()} looked for food {s.at}, and at last {hero.he()} found {article(s.food)}."]
    p2 = [f"Just as {hero.he()} was about to eat it, {hero.he()} saw {friend.intro()}.",
          f"{friend.Ref()} looked hungry too.",
          f"{hero.Ref()} thought for a moment. Then {hero.he()} broke the {s.food} in two and gave half to {friend.ref()}.",
          say(friend, "Thank you!")]
    p3 = [f"The {s.food} was small, but it tasted better because they shared it.",
          f"After that, {hero.ref()} and {friend.ref()} always shared their food."]
    return [p1, p2, p3], "share"


# Plots by name (chat requests ask for some by topic); weather each plot may have.
PLOTS = {
    "lost": (lost_thing, ["sunny", "windy", "plain"]),
    "rescue": (rescue, ["sunny", "windy", "plain", "snowy"]),
    "share": (share, ["sunny", "plain", "windy"]),
    "fear": (fear, ["plain", "sunny", "rainy"]),
    "try": (try_again, ["sunny", "plain", "windy"]),
    "friend": (new_friend, ["sunny", "plain", "snowy"]),
    "rain": (rainy_day, ["rainy"]),
    "sorry": (sorry, ["sunny", "plain", "rainy"]),
    "gift": (gift, ["sunny", "plain", "snowy", "windy"]),
    "race": (race, ["sunny", "plain", "windy"]),
    "adventure": (adventure, ["sunny", "plain", "windy"]),
    "hungry": (hungry, ["plain", "sunny", "snowy"]),
}
