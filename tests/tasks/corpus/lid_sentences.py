"""Sentences the LID tests share: Kazakh and Russian (same script, CLD2 tells them apart) and English."""

KAZAKH = [
    "Қазақстан Орталық Азиядағы ең үлкен мемлекет болып табылады.",
    "Бүгін таңертең біз ауылға барып, әжемізге сәлем бердік.",
    "Оқушылар мектепте математика мен тарих пәндерін оқиды.",
    "Алматы қаласы таулардың етегінде орналасқан әдемі қала.",
]
RUSSIAN = [
    "Мой брат работает врачом в большой городской больнице уже десять лет.",
    "Сегодня утром мы поехали в деревню и передали привет бабушке.",
]
ENGLISH = [
    "Kazakhstan is the largest country in Central Asia.",
    "This morning we went to the village and greeted our grandmother.",
    "Pupils study mathematics and history at school.",
    "Almaty is a beautiful city at the foot of the mountains.",
]
