"""A seeded generator of simple children's stories, the training text of the default model.

The stories are TinyStories-like: a hero (child or small animal) with a name and a pronoun, a
friend, a favourite toy, a place, and one of several small plots told with varied sentences. The
text is regular enough for a 260K-parameter model to learn, yet the model still has to keep
names, pronouns and objects consistent across sentences. Every story starts "Once upon a time".
Each choice (name, place, plot, phrasing) follows a Zipf-like law over its options, listed most
common first, as words do in real text.
"""
from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")
ZIPF_EXPONENT = 1.5

GIRLS = ("Lily", "Mia", "Sue", "Anna", "Lucy", "Amy", "Emma", "Zoe", "Kim", "Rose")
BOYS = ("Tom", "Ben", "Max", "Sam", "Tim", "Jack", "Leo", "Bob", "Dan", "Joe")
KINDS = {"she": ("girl", "bunny", "kitten", "bird"), "he": ("boy", "puppy", "bear", "frog")}
TRAITS = ("little", "kind", "happy", "curious", "brave", "shy", "funny", "small")
PLACES = ("park", "garden", "forest", "beach", "farm", "town", "meadow", "yard")
COLORS = ("red", "blue", "green", "yellow", "pink", "big", "shiny", "soft")
TOYS = ("ball", "kite", "doll", "car", "hat", "boat", "drum", "book", "balloon", "truck")
HIDES = ("the bed", "a tree", "a big rock", "the bench", "some leaves", "the table", "a box")
ANIMALS = ("dog", "cat", "duck", "bird", "frog", "squirrel", "turtle", "butterfly")
FOODS = ("cake", "cookies", "pie", "soup", "bread", "muffins")
GROWNUPS = ("mom", "dad", "grandma", "grandpa")
ACTIVITIES = ("run and jump", "sing songs", "draw pictures", "play games", "dance",
              "look at the sky", "read books", "build things")
INDOOR = ("build a fort", "draw pictures", "play a game", "read a book", "make a puzzle")


@dataclass(frozen=True)
class Hero:
    """The main character and the words that refer to it."""

    name: str
    kind: str
    he: str  # "he" or "she"

    @property
    def his(self) -> str:
        return "his" if self.he == "he" else "her"

    @property
    def him(self) -> str:
        return "him" if self.he == "he" else "her"


def _pick(rng: random.Random, options: Sequence[T]) -> T:
    """One of ``options``, the k-th (from 1) with weight 1/k**1.5: the likeliest continuation has a
    clear margin, so a model's greedy path does not hinge on near-ties."""
    weights = [1 / k**ZIPF_EXPONENT for k in range(1, len(options) + 1)]
    return rng.choices(options, weights=weights)[0]


def _cap(s: str) -> str:
    return s[0].upper() + s[1:]


def _hero(rng: random.Random, avoid: str = "") -> Hero:
    he = _pick(rng, ("he", "she"))
    name = _pick(rng, [n for n in (BOYS if he == "he" else GIRLS) if n != avoid])
    return Hero(name, _pick(rng, KINDS[he]), he)


def _opening(rng: random.Random, h: Hero) -> list[str]:
    trait, place = _pick(rng, TRAITS), _pick(rng, PLACES)
    first = _pick(rng, (
        f"Once upon a time, there was a {trait} {h.kind} named {h.name}.",
        f"Once upon a time, in a small house near the {place}, there lived a {trait} {h.kind}"
        f" named {h.name}.",
        f"Once upon a time, a {trait} {h.kind} named {h.name} lived near a big {place}.",
    ))
    second = _pick(rng, (
        f"{_cap(h.he)} loved to {_pick(rng, ACTIVITIES)}.",
        f"Every day, {h.he} liked to {_pick(rng, ACTIVITIES)} with {h.his} {_pick(rng, GROWNUPS)}.",
        f"{h.name} was always {_pick(rng, ('happy', 'busy', 'kind', 'curious'))}.",
    ))
    return [first, second]


def _lost_toy(rng: random.Random, h: Hero, f: Hero) -> list[str]:
    toy, color, place = _pick(rng, TOYS), _pick(rng, COLORS), _pick(rng, PLACES)
    a = _pick(rng, HIDES)
    b = _pick(rng, [x for x in HIDES if x != a])
    return [
        _pick(rng, (f"{h.name} had a {color} {toy}. {_cap(h.he)} took it everywhere.",
                    f"{h.name}'s favorite toy was a {color} {toy}.")),
        f"One day, {h.name} went to the {place} to play with the {toy}.",
        _pick(rng, (f"When it was time to go home, {h.he} could not find the {toy}.",
                    f"After a while, {h.he} looked around, but the {toy} was gone!")),
        _pick(rng, (f"{h.name} felt very sad and started to cry.",
                    f"{h.name} was so sad. \"Where is my {toy}?\" {h.he} asked.")),
        f"{f.name} came and said, \"Don't be sad, {h.name}. I will help you!\"",
        f"They looked under {a} and behind {b}.",
        _pick(rng, (f"At last, {f.name} found the {toy} near {b}.",
                    f"Then {h.name} saw something {color} near {b}. It was the {toy}!")),
        f"\"Thank you, {f.name}!\" said {h.name}. {_cap(h.he)} gave {f.name} a big hug.",
    ]


def _sharing(rng: random.Random, h: Hero, f: Hero) -> list[str]:
    toy, color = _pick(rng, TOYS), _pick(rng, COLORS)
    return [
        _pick(rng, (f"One day, {h.his} {_pick(rng, GROWNUPS)} gave {h.him} a {color} {toy}.",
                    f"For {h.his} birthday, {h.name} got a new {color} {toy}.")),
        f"{h.name} played with the {toy} all day.",
        f"Then {f.name} came to play. {f.name} wanted to play with the {toy} too.",
        f"At first, {h.name} did not want to share. {_cap(h.he)} said, \"No, it is my {toy}!\"",
        _pick(rng, (f"{f.name} was sad and sat down alone.",
                    f"{f.name} looked at the ground and did not say anything.")),
        f"{h.name} saw that {f.name} was sad. {_cap(h.he)} did not like that.",
        f"So {h.he} said, \"You can play with my {toy}, {f.name}.\"",
        _pick(rng, ("They played together and had lots of fun.",
                    f"{f.name} smiled, and they took turns with the {toy}.")),
        "Sharing made them both happy.",
    ]


def _rain(rng: random.Random, h: Hero, f: Hero) -> list[str]:
    place, grown, game = _pick(rng, PLACES), _pick(rng, GROWNUPS), _pick(rng, INDOOR)
    weather = _pick(rng, ("raining", "snowing", "very windy"))
    return [
        f"One morning, {h.name} wanted to go to the {place} with {f.name}.",
        f"But when they looked out the window, it was {weather}.",
        f"{h.name} was sad. \"Now we can not play outside,\" {h.he} said.",
        f"{_cap(h.his)} {grown} smiled and said, \"Why don't you {game} inside?\"",
        f"So {h.name} and {f.name} decided to {game}. It was a lot of fun.",
        _pick(rng, ("After a while, the sun came out.",
                    "Later, the sky was blue again and the sun came out.")),
        f"They ran to the {place} and played until it was dark.",
    ]


def _animal(rng: random.Random, h: Hero, f: Hero) -> list[str]:
    animal, place = _pick(rng, ANIMALS), _pick(rng, PLACES)
    trouble = _pick(rng, ("stuck in a tree", "lost", "hungry", "cold", "hurt"))
    help_ = {
        "stuck in a tree": "helped it climb down",
        "lost": "helped it find its home",
        "hungry": "gave it some bread",
        "cold": "wrapped it in a warm blanket",
        "hurt": "took it to the vet",
    }[trouble]
    return [
        _pick(rng, (f"One day, {h.name} went for a walk in the {place}.",
                    f"One sunny day, {h.name} and {f.name} were playing in the {place}.")),
        f"{h.name} saw a little {animal}. The {animal} was {trouble}.",
        f"\"Poor {animal},\" said {h.name}. \"I want to help you.\"",
        f"{h.name} called {f.name}, and together they {help_}.",
        _pick(rng, (f"The {animal} was very happy. It said thank you in its own way.",
                    f"The {animal} felt much better and jumped with joy.")),
        f"After that, the {animal} came to visit {h.name} every day.",
    ]


def _baking(rng: random.Random, h: Hero, f: Hero) -> list[str]:
    food, grown = _pick(rng, FOODS), _pick(rng, GROWNUPS)
    return [
        f"One day, {h.name} and {h.his} {grown} decided to make {food}.",
        f"They got flour, milk and eggs. {h.name} mixed everything in a big bowl.",
        f"Then they put the {food} in the oven and waited.",
        _pick(rng, (f"Soon the house smelled so good. The {food} was ready!",
                    f"After a long time, {h.his} {grown} said, \"The {food} is ready!\"")),
        f"{h.name} wanted to share the {food} with {f.name}.",
        f"{_cap(h.he)} ran to {f.name}'s house and knocked on the door.",
        f"{f.name} tasted the {food} and said, \"Yum! This is the best {food} ever!\"",
    ]


def _brave(rng: random.Random, h: Hero, f: Hero) -> list[str]:
    fear = _pick(rng, ("the dark", "the big slide", "the water", "loud noises", "the big dog"))
    return [
        f"{h.name} was scared of {fear}.",
        f"One night, {h.he} told {h.his} {_pick(rng, GROWNUPS)}, \"I am scared of {fear}.\"",
        "\"It is okay to be scared,\" came the answer. \"But you are brave too.\"",
        f"The next day, {h.name} went with {f.name} to try again.",
        f"{f.name} held {h.his} hand. {h.name} took a deep breath.",
        f"This time, {h.he} was not scared anymore. {_cap(h.he)} felt so proud.",
    ]


def _garden(rng: random.Random, h: Hero, f: Hero) -> list[str]:
    plant, grown = _pick(rng, ("flower", "tree", "carrot", "sunflower")), _pick(rng, GROWNUPS)
    return [
        f"One spring day, {h.his} {grown} gave {h.name} a tiny seed.",
        f"\"If you take care of it, it will grow into a {plant},\" {h.his} {grown} said.",
        f"{h.name} put the seed in the ground and gave it some water.",
        _pick(rng, (f"Every morning, {h.he} looked at the ground, but nothing happened.",
                    f"{_cap(h.he)} waited and waited, but the seed did not grow.")),
        f"{h.name} told {f.name}, \"Maybe my seed is sleeping.\"",
        f"\"Be patient,\" said {f.name}. \"Good things take time.\"",
        f"One day, {h.name} saw a little green leaf. Soon it was a big {plant}!",
    ]


def _new_friend(rng: random.Random, h: Hero, f: Hero) -> list[str]:
    place, game = _pick(rng, PLACES), _pick(rng, ("tag", "hide and seek", "catch", "jump rope"))
    return [
        f"One day, {h.name} saw a new {f.kind} in the {place}. {_cap(f.he)} was all alone.",
        f"{h.name} felt a little shy, but {h.he} walked over and said, \"Hello!\"",
        f"\"My name is {f.name},\" said the {f.kind}. \"I just moved here.\"",
        f"\"Do you want to play {game} with me?\" asked {h.name}.",
        f"{f.name} smiled and said, \"Yes, please!\"",
        _pick(rng, (f"They played {game} all afternoon and laughed a lot.",
                    f"They played {game} until the sun went down.")),
    ]


PLOTS = (_lost_toy, _sharing, _rain, _animal, _baking, _brave, _garden, _new_friend)
ENDINGS = (
    "From that day on, {a} and {b} were best friends.",
    "{a} learned that it is good to help others.",
    "That night, {a} went to bed with a big smile.",
    "{a} and {b} had the best day ever.",
)


def story(rng: random.Random) -> str:
    """One story drawn from ``rng``."""
    h = _hero(rng)
    f = _hero(rng, avoid=h.name)
    sentences = _opening(rng, h) + _pick(rng, PLOTS)(rng, h, f)
    sentences.append(_pick(rng, ENDINGS).format(a=h.name, b=f.name))
    return " ".join(sentences)


def generate(n_stories: int, seed: int) -> list[str]:
    """``n_stories`` stories, the same list for the same ``seed``."""
    rng = random.Random(seed)
    return [story(rng) for _ in range(n_stories)]
